"""Parses Prometheus text exposition format (stdin) with the Prometheus project's own Python
client (Debian's python3-prometheus-client: prometheus_client.parser.text_string_to_metric_families)
and prints what it understood as JSON: one object per family with its type, help text and samples.
A malformed exposition makes the parser raise, and this script exit non-zero with its message."""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def value(v):
    # JSON has no NaN or infinities: keep them as the strings Prometheus writes.
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return v


families = []
for family in text_string_to_metric_families(sys.stdin.read()):
    families.append(
        {
            "name": family.name,
            "type": family.type,
            "documentation": family.documentation,
            "samples": [{"name": s.name, "labels": s.labels, "value": value(s.value)} for s in family.samples],
        }
    )
print(json.dumps(families))
