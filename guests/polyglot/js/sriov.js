// `js-sriov`: SR-IOV virtual functions as DRA partitions, in JavaScript.
//
// Each advertised device is an SR-IOV physical function (PF). `dra-layout`
// gives PF number n (its position) the counter set `pf-<n>` with `vfs` (the
// PF's `sriov_totalvfs`, else guest-config `vfs`, else 8) and `queue-pairs`
// (guest-config, default 64); the whole PF takes all of both, and each
// partition `pf-<n>-vf-<i>` takes one VF and its share of the queue pairs.
// `dra-prepare` creates a claimed VF through a granted attribute and reports
// it Ready with its interface name; `dra-unprepare` removes it.
//
//     writable-attributes = ["sriov_vf_enable", "sriov_vf_disable"]
//     [guest-config]
//     queue-pairs = "64"
//     create-attribute = "sriov_vf_enable"
//     remove-attribute = "sriov_vf_disable"
//
// The same guest exists in Python (`python/sriov/app.py`) and C
// (`c/sriov.c`). Componentized with the componentize-js library API against
// the world `wdp-example:sriov/sriov-guest` (`guests/polyglot/wit/sriov.wit`,
// see `build.mjs`).

import { config, log } from 'wasm-device-plugin:policy/host@0.1.3';
import { candidates, readAttribute, writeAttribute } from 'wasm-device-plugin:policy/hardware@0.1.3';

const setting = (name, fallback) => new Map(config()).get(name) ?? fallback;

function wholeNumber(what, text) {
  text = text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
  if (!/^[0-9]{1,9}$/.test(text)) throw `${what}: expected a whole number, got "${text}"`;
  return Number(text);
}

/** The PF's `sriov_totalvfs`, else guest-config `vfs`, else 8. */
function totalVfs(pf) {
  let text;
  try {
    text = readAttribute(pf, 'sriov_totalvfs');
  } catch {
    return wholeNumber('guest-config key `vfs`', setting('vfs', '8'));
  }
  return wholeNumber(`${pf}: sriov_totalvfs`, text);
}

const amounts = (vfs, queuePairs) => [
  { name: 'vfs', value: String(vfs) },
  { name: 'queue-pairs', value: String(queuePairs) },
];

/** The VF number of a partition this guest made (`pf-<n>-vf-<i>`), or null. */
function vfIndex(device) {
  const match = /-vf-([0-9]{1,9})$/.exec(device.id);
  return device.partition && match ? Number(match[1]) : null;
}

const pfPresent = (pf) => candidates().some((c) => c.id === pf && c.present);

/** The PF's first network interface (`pci.net`), or ''. */
function netdev(pf) {
  const candidate = candidates().find((c) => c.id === pf);
  if (!candidate) return '';
  return (new Map(candidate.attributes).get('pci.net') ?? '').split(',')[0];
}

/** The `err` string of a failed import call: the call throws a
 * ComponentError whose `payload` is the host's message. */
const why = (error) => error?.payload ?? `${error}`;

/** Thrown strings become the `err` of the result; anything else thrown
 * would trap with "expected a string": turn it into an error message. */
function hook(body) {
  try {
    return body();
  } catch (error) {
    throw typeof error === 'string' ? error : `${error}\n${error?.stack ?? ''}`.trim();
  }
}

/** The `wasm-device-plugin:policy/dra-layout` export. */
export const draLayout = {
  describe: (devices) =>
    hook(() => {
      const queuePairs = wholeNumber('guest-config key `queue-pairs`', setting('queue-pairs', '64'));
      const layout = { counterSets: [], devices: [], partitions: [] };
      devices.forEach((device, n) => {
        const pf = device.candidates[0] ?? device.id;
        const vfs = totalVfs(pf);
        const counterSet = `pf-${n}`;
        layout.counterSets.push({ name: counterSet, counters: amounts(vfs, queuePairs) });
        // The whole PF takes every VF and queue pair: it excludes its VFs.
        layout.devices.push({
          id: device.id,
          consumesCounters: [{ counterSet, counters: amounts(vfs, queuePairs) }],
          capacity: [],
          allowMultipleAllocations: false,
        });
        for (let i = 0; i < vfs; i++) {
          layout.partitions.push({
            id: `pf-${n}-vf-${i}`,
            parent: device.id,
            attributes: [['vf-index', String(i)], ['pf-address', pf]],
            consumesCounters: [{ counterSet, counters: amounts(1, Math.floor(queuePairs / vfs)) }],
            capacity: [],
          });
        }
      });
      return layout;
    }),
};

/** The `wasm-device-plugin:policy/dra-prepare` export. */
export const draPrepare = {
  prepare: (devices) =>
    hook(() => {
      const create = setting('create-attribute', 'sriov_vf_enable');
      const statuses = [];
      for (const device of devices) {
        const i = vfIndex(device);
        const pf = device.deviceId; // built-in discovery: the PF's address
        if (i === null) continue; // the whole PF: nothing to create
        // A stand-in: on a real NIC a vendor tool (or `sriov_numvfs` and the
        // VF's own attributes) creates and configures the VF.
        try {
          writeAttribute(pf, create, String(i));
        } catch (error) {
          throw `${device.id}: cannot create VF ${i} of ${pf}: ${why(error)}`;
        }
        log('info', `${device.id}: created VF ${i} of ${pf}`);
        const name = netdev(pf);
        statuses.push({
          id: device.id,
          conditions: [{ type: 'Ready', status: 'True', reason: 'VfReady', message: `VF ${i} of ${pf} is ready` }],
          data: undefined,
          network: { interfaceName: name ? `${name}v${i}` : '', ips: [], hardwareAddress: '' },
        });
      }
      return statuses;
    }),
};

/** The `wasm-device-plugin:policy/dra-unprepare` export. */
export const draUnprepare = {
  unprepare: (devices) =>
    hook(() => {
      const remove = setting('remove-attribute', 'sriov_vf_disable');
      for (const device of devices) {
        const i = vfIndex(device);
        const pf = device.deviceId;
        // Remove only what exists: a PF that is gone took its VFs with it,
        // and the attribute ignores a VF that was never created.
        if (i === null || !pfPresent(pf)) continue;
        try {
          writeAttribute(pf, remove, `-${i}`);
        } catch (error) {
          throw `${device.id}: cannot remove VF ${i} of ${pf}: ${why(error)}`;
        }
        log('info', `${device.id}: removed VF ${i} of ${pf}`);
      }
    }),
};
