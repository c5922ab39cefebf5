

class PreferredAllocation(exports.PreferredAllocation):
    """`preferred-allocation`: the must-include devices first, then the
    first available ones, up to the requested size."""

    def choose(self, request: preferred_allocation.Request) -> list[str]:
        size = request.size
        if len(request.must_include) > size:
            raise Err(
                f"{len(request.must_include)} must-include devices "
                f"do not fit an allocation of {size}"
            )
        chosen = list(request.must_include)
        for device in request.available:
            if len(chosen) == size:
                break
            if device.id not in chosen:
                chosen.append(device.id)
        if len(chosen) < size:
            raise Err(f"only {len(chosen)} devices available for an allocation of {size}")
        return chosen
