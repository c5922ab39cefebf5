// `js-packing`: the `numa-packing` preferred-allocation guest, in JavaScript.
//
// Same behaviour as the Rust guest (`guests/numa-packing`, logic in
// `guests/packing-core`): keep the must-include IDs, then pack by NUMA node
// and link locality (`link.group` attribute, else the PCIe switch from
// `pci.path`), best fit, ties broken by ID.
//
// It also exports the by-index form (`preferred-allocation-indexed`): the
// host sends the device table once per device-set generation
// (`setDevices`) and then, per call, only positions in it. Turning the
// request into JavaScript objects is most of a plain call's cost; by index
// a call lifts a few integers and reuses the devices lifted once.
//
// Componentized with the componentize-js library API against the WIT world
// `preferred-allocation-indexed-guest` (see `build.mjs`). WIT `s64` values arrive
// as BigInt; a thrown string becomes the `err` of the result.

/** Code-point order (Rust's byte order on UTF-8), not UTF-16 order. */
function cmpCodePoints(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return fixup(x) - fixup(y);
  }
  return a.length - b.length;
}

/** Surrogates (code points above U+FFFF) sort after U+E000..U+FFFF. */
function fixup(unit) {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

/** Without surrogates, UTF-16 order is code-point order: the engine's own
 * comparison is much faster than the loop above in an interpreter. */
function cmpNative(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

const SURROGATE = /[\ud800-\udfff]/;
let cmp = cmpNative;

function cmpBig(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The first value of attribute `name`; null when absent or empty. */
function lookup(attributes, name) {
  // An indexed loop: destructuring iteration is slow in an interpreter.
  for (let i = 0; i < attributes.length; i++) {
    const pair = attributes[i];
    if (pair[0] === name) return pair[1] === '' ? null : pair[1];
  }
  return null;
}

/** The parent directory, or null (no slash, or an empty parent). */
function parentDir(path) {
  if (path === null) return null;
  let end = path.length;
  while (end > 0 && path[end - 1] === '/') end--;
  path = path.slice(0, end);
  const slash = path.lastIndexOf('/');
  return slash > 0 ? path.slice(0, slash) : null;
}

/** `link.group`, else the grandparent directory of `pci.path` (the PCIe
 * switch a device sits behind), else null. */
function localityKey(attributes) {
  const group = lookup(attributes, 'link.group');
  if (group !== null) return group;
  return parentDir(parentDir(lookup(attributes, 'pci.path')));
}

/** Rust's `{:?}` of a string. */
function debugStr(text) {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code === 0) out += '\\0';
    else if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) out += `\\u{${code.toString(16)}}`;
    else out += ch;
  }
  return out + '"';
}

function take(members, remaining, chosen) {
  const count = Math.min(members.length, remaining);
  for (let i = 0; i < count; i++) chosen.push(members[i]);
  return remaining - count;
}

const NO_NUMA = Number.MAX_SAFE_INTEGER;

export function choose(available, mustInclude, size) {
  // Distinct available devices, first occurrence wins.
  const byId = new Map();
  for (const device of available) {
    if (!byId.has(device.id)) byId.set(device.id, device);
  }
  if (byId.size < size) {
    throw `only ${byId.size} devices available for an allocation of ${size}`;
  }

  const chosen = [];
  const chosenSet = new Set();
  for (const id of mustInclude) {
    if (!byId.has(id)) throw `must-include device ${debugStr(id)} is not available`;
    if (!chosenSet.has(id)) {
      chosenSet.add(id);
      chosen.push(id);
    }
  }
  if (chosen.length > size) {
    throw `${chosen.length} must-include devices do not fit an allocation of ${size}`;
  }
  let remaining = size - chosen.length;
  if (remaining === 0) return chosen;

  const locality = new Map();
  let surrogates = false;
  for (const [id, device] of byId) {
    const key = localityKey(device.attributes);
    locality.set(id, key);
    surrogates ||= SURROGATE.test(id) || (key !== null && SURROGATE.test(key));
  }
  cmp = surrogates ? cmpCodePoints : cmpNative;
  const ids = [...byId.keys()].sort(cmp);

  // Rank NUMA nodes: nodes of must-include devices first (most such
  // devices first), then by the number of other available devices.
  const perNode = new Map(); // BigInt node -> [must, other]
  const affinity = new Set();
  for (const id of ids) {
    const must = chosenSet.has(id);
    for (const node of byId.get(id).numaNodes) {
      let counts = perNode.get(node);
      if (!counts) perNode.set(node, (counts = [0, 0]));
      counts[must ? 0 : 1]++;
    }
    if (must && locality.get(id) !== null) affinity.add(locality.get(id));
  }
  const nodes = [...perNode.entries()].sort(
    (a, b) => b[1][0] - a[1][0] || b[1][1] - a[1][1] || cmpBig(a[0], b[0]),
  );
  const rank = new Map(nodes.map(([node], index) => [node, index]));

  // Tier -> { grouped: key -> members, lone: [ids] }.
  const tiers = new Map();
  for (const id of ids) {
    if (chosenSet.has(id)) continue;
    let tier = NO_NUMA;
    for (const node of byId.get(id).numaNodes) tier = Math.min(tier, rank.get(node));
    let entry = tiers.get(tier);
    if (!entry) tiers.set(tier, (entry = { grouped: new Map(), lone: [] }));
    const key = locality.get(id);
    if (key === null) entry.lone.push(id);
    else if (entry.grouped.has(key)) entry.grouped.get(key).push(id);
    else entry.grouped.set(key, [id]);
  }

  for (const tier of [...tiers.keys()].sort((a, b) => a - b)) {
    if (remaining === 0) break;
    const { grouped, lone } = tiers.get(tier);
    const groups = [...grouped.keys()].sort(cmp).map((key) => ({ key, members: grouped.get(key) }));
    for (const id of lone) groups.push({ key: null, members: [id] });

    // Groups linked to what is already chosen come first, by key.
    const rest = [];
    for (const group of groups) {
      if (remaining > 0 && group.key !== null && affinity.has(group.key)) {
        remaining = take(group.members, remaining, chosen);
      } else {
        rest.push(group);
      }
    }

    // Then best fit: sorted by (size, key, first ID).
    rest.sort(
      (a, b) =>
        a.members.length - b.members.length ||
        (a.key === null ? (b.key === null ? 0 : -1) : b.key === null ? 1 : cmp(a.key, b.key)) ||
        cmp(a.members[0], b.members[0]),
    );
    while (remaining > 0 && rest.length > 0) {
      let pick = rest.findIndex((group) => group.members.length >= remaining);
      if (pick < 0) {
        // None covers the rest: the first of the biggest groups.
        const biggest = rest[rest.length - 1].members.length;
        pick = rest.findIndex((group) => group.members.length >= biggest);
      }
      const [group] = rest.splice(pick, 1);
      remaining = take(group.members, remaining, chosen);
    }
  }
  return chosen;
}

/** Thrown strings become the `err` of the result; anything else thrown
 * (a TypeError from a bug, say) would trap with "expected a string": turn
 * it into an error message instead. */
function asErr(error) {
  return typeof error === 'string' ? error : `${error}\n${error?.stack ?? ''}`.trim();
}

/** The `wasm-device-plugin:policy/preferred-allocation` export. */
export const preferredAllocation = {
  choose(request) {
    try {
      return choose(request.available, request.mustInclude, request.size);
    } catch (error) {
      throw asErr(error);
    }
  },
};

/** The device table of the latest `setDevices`, and each ID's position. */
let table = null;
let positions = new Map();

function deviceAt(position) {
  if (position >= table.length) {
    throw `position ${position} is outside the device table of ${table.length}`;
  }
  return table[position];
}

/** The `wasm-device-plugin:policy/preferred-allocation-indexed` export. */
export const preferredAllocationIndexed = {
  setDevices(generation, devices) {
    table = devices;
    positions = new Map();
    for (let i = 0; i < devices.length; i++) positions.set(devices[i].id, i);
  },
  choose(request) {
    try {
      if (table === null) throw 'no device table: the host called choose before set-devices';
      const available = [];
      for (let i = 0; i < request.available.length; i++) available.push(deviceAt(request.available[i]));
      const must = [];
      for (let i = 0; i < request.mustInclude.length; i++) must.push(deviceAt(request.mustInclude[i]).id);
      const chosen = choose(available, must, request.size);
      const answer = new Uint32Array(chosen.length);
      for (let i = 0; i < chosen.length; i++) answer[i] = positions.get(chosen[i]);
      return Array.from(answer);
    } catch (error) {
      throw asErr(error);
    }
  },
};
