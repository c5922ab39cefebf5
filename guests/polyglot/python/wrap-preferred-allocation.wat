;; Re-exports only the `preferred-allocation` hook of a componentize-py
;; component. componentize-py also exports an `exports` instance (its
;; build-time `init` entry point), which the host refuses as an unknown
;; export; `wasm-tools compose` plugs the Python component into this
;; wrapper, so the result exports the hook alone and imports what the
;; Python component imports. The types mirror wit/policy.wit.
(component
  (type $types-type
    (instance
      (type $pair (tuple string string))
      (type $attrs (list $pair))
      (export "attributes" (type $attributes (eq $attrs)))
      (type $nt (enum "char" "block" "other"))
      (export "node-type" (type $node-type (eq $nt)))
      (type $dn (record (field "path" string) (field "node-type" $node-type) (field "major" u32) (field "minor" u32)))
      (export "device-node" (type $device-node (eq $dn)))
      (type $numa (list s64))
      (type $nodes (list $device-node))
      (type $dr (record (field "id" string) (field "device-id" string) (field "numa-nodes" $numa)
                        (field "attributes" $attributes) (field "nodes" $nodes)))
      (export "device-ref" (type (eq $dr)))
    )
  )
  (import "wasm-device-plugin:policy/types@0.1.0" (instance $types (type $types-type)))
  (alias export $types "device-ref" (type $device-ref))
  (type $hook-type
    (instance
      (alias outer 1 $device-ref (type $dr-outer))
      (export "device-ref" (type $dr (eq $dr-outer)))
      (type $refs (list $dr))
      (type $ids (list string))
      (type $req (record (field "available" $refs) (field "must-include" $ids) (field "size" u32)))
      (export "request" (type $request (eq $req)))
      (type $res (result $ids (error string)))
      (type $fn (func (param "request" $request) (result $res)))
      (export "choose" (func (type $fn)))
    )
  )
  (import "wasm-device-plugin:policy/preferred-allocation@0.1.0" (instance $hook (type $hook-type)))
  (export "wasm-device-plugin:policy/preferred-allocation@0.1.0" (instance $hook))
)
