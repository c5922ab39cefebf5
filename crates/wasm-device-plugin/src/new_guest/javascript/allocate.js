
/** `allocate`: the built-in answer (one device spec per device node), plus
 * `EXAMPLE_VISIBLE_DEVICES` listing the container's device IDs. */
export const allocate = {
  allocate(devices, builtin) {
    return hook(() => {
      builtin.envs.push(['EXAMPLE_VISIBLE_DEVICES', devices.map((d) => d.id).join(',')]);
      return builtin;
    });
  },
};
