"""What OpenStack's APIs share in their errors: DRF's field messages as readable lines."""


def describe(data, prefix: str = "") -> list[str]:
    """Field messages as "field: message" lines (nested fields joined with dots)."""
    if isinstance(data, dict):
        if set(data) == {"detail"} and not prefix:
            return describe(data["detail"])
        lines = []
        for key, value in data.items():
            name = "" if key in ("non_field_errors", "detail") else str(key)
            lines += describe(value, f"{prefix}.{name}" if prefix and name else prefix or name)
        return lines
    if isinstance(data, list):
        return [line for item in data for line in describe(item, prefix)]
    return [f"{prefix}: {data}" if prefix else str(data)]
