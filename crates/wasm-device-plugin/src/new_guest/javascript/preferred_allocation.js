
/** `preferred-allocation`: the must-include devices first, then the first
 * available ones, up to the requested size. */
export const preferredAllocation = {
  choose({ available, mustInclude, size }) {
    return hook(() => {
      if (mustInclude.length > size) {
        throw `${mustInclude.length} must-include devices do not fit an allocation of ${size}`;
      }
      const chosen = [...mustInclude];
      for (const device of available) {
        if (chosen.length === size) break;
        if (!chosen.includes(device.id)) chosen.push(device.id);
      }
      if (chosen.length < size) {
        throw `only ${chosen.length} devices available for an allocation of ${size}`;
      }
      return chosen;
    });
  },
};
