

class Health(exports.Health):
    """`health`: a device is healthy while every one of its candidates is present."""

    def check(self, devices: list[health.DeviceFacts]) -> list[health.Verdict]:
        verdicts = []
        for facts in devices:
            present = {c.id for c in facts.candidates if c.present}
            missing = [id for id in facts.device.candidates if id not in present]
            if not missing:
                verdicts.append(
                    health.Verdict(
                        id=facts.device.id,
                        healthy=True,
                        reason="every candidate is present",
                    )
                )
                continue
            reason = f"not present: {', '.join(missing)}"
            host.log(host.LogLevel.WARN, f"{facts.device.id}: {reason}")
            verdicts.append(health.Verdict(id=facts.device.id, healthy=False, reason=reason))
        return verdicts
