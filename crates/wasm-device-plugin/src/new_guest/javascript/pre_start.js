
/** `pre-start`: refuses to start a container with a device that has no
 * device node; a thrown string fails the start with its message. */
export const preStart = {
  preStart(devices) {
    return hook(() => {
      const bare = devices.find((device) => device.nodes.length === 0);
      if (bare) throw `device ${bare.id} has no device node`;
      log('info', `pre-start: ${devices.length} device(s) ready`);
    });
  },
};
