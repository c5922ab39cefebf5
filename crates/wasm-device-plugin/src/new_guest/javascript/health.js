
/** `health`: a device is healthy while every one of its candidates is present. */
export const health = {
  check(devices) {
    return hook(() =>
      devices.map(({ device, candidates }) => {
        const present = new Set(candidates.filter((c) => c.present).map((c) => c.id));
        const missing = device.candidates.filter((id) => !present.has(id));
        if (missing.length === 0) {
          return { id: device.id, healthy: true, reason: 'every candidate is present' };
        }
        const reason = `not present: ${missing.join(', ')}`;
        log('warn', `${device.id}: ${reason}`);
        return { id: device.id, healthy: false, reason };
      }),
    );
  },
};
