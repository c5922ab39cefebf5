// `js-health`: the `presence-health` health guest, in JavaScript.
//
// Same behaviour as the Rust guest (`guests/presence-health`): a device is
// unhealthy while any of its candidates is not present, and (for PCI
// candidates) while no driver is bound or the bound driver is not in the
// config list `drivers` (when given). Every verdict carries a reason.
//
//     [guest-config]
//     drivers = "nvidia,vfio-pci"
//
// Componentized with the componentize-js library API against the WIT world
// `health-guest` (see `build.mjs`).

import { config } from 'wasm-device-plugin:policy/host@0.1.3';

// Unicode White_Space, what Rust's `str::trim` removes (JavaScript's own
// `trim()` differs: it removes U+FEFF and keeps U+0085).
const WS = '[\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]+';
const LEADING = new RegExp('^' + WS);
const TRAILING = new RegExp(WS + '$');
const trim = (text) => text.replace(LEADING, '').replace(TRAILING, '');
const QUOTES = /^["']+|["']+$/g;

function lookup(pairs, name) {
  for (const [key, value] of pairs) if (key === name) return value;
  return null;
}

/** A config value as a list, read like the Rust SDK's `Config::list`:
 * comma-separated, blanks trimmed, empty items dropped, `["a", "b"]` too. */
function configList(key) {
  let value = lookup(config(), key);
  if (value === null) return [];
  value = trim(value);
  if (value.length >= 2 && value.startsWith('[') && value.endsWith(']')) value = value.slice(1, -1);
  return value
    .split(',')
    .map(trim)
    .filter((item) => item !== '')
    .map((item) => item.replace(QUOTES, ''))
    .filter((item) => item !== '');
}

/** Why `candidate` makes its device unhealthy, if it does. */
function problem(candidate, drivers) {
  if (!candidate.present) return `candidate ${candidate.id} is not present`;
  if (candidate.kind !== 'pci') return null;
  const driver = lookup(candidate.attributes, 'pci.driver');
  if (!driver) return `candidate ${candidate.id} has no driver bound`;
  if (drivers.length > 0 && !drivers.includes(driver)) {
    return `candidate ${candidate.id} is bound to driver ${driver}, expected one of ${drivers.join(', ')}`;
  }
  return null;
}

function verdict(facts, drivers) {
  const { device } = facts;
  const problems = [];
  for (const id of device.candidates) {
    const candidate = facts.candidates.find((c) => c.id === id);
    if (!candidate) problems.push(`candidate ${id} is gone`);
    else {
      const found = problem(candidate, drivers);
      if (found !== null) problems.push(found);
    }
  }
  if (problems.length > 0) return { id: device.id, healthy: false, reason: problems.join('; ') };
  return { id: device.id, healthy: true, reason: `all ${device.candidates.length} candidates present` };
}

/** Thrown strings become the `err` of the result; anything else thrown
 * would trap with "expected a string": turn it into an error message. */
function asErr(error) {
  return typeof error === 'string' ? error : `${error}\n${error?.stack ?? ''}`.trim();
}

/** The `wasm-device-plugin:policy/health` export. */
export const health = {
  check(devices) {
    try {
      const drivers = configList('drivers');
      return devices.map((facts) => verdict(facts, drivers));
    } catch (error) {
      throw asErr(error);
    }
  },
};
