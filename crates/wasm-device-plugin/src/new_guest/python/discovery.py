

class Discovery(exports.Discovery):
    """`discovery`: one device per present candidate, named after it."""

    def discover(self, candidates: list[types.Candidate]) -> list[types.Device]:
        return [
            types.Device(
                id=candidate.id,
                candidates=[candidate.id],
                numa_nodes=candidate.numa_nodes,
                attributes=[],
                replicas=0,
            )
            for candidate in candidates
            if candidate.present
        ]
