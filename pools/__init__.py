"""VM pools: identical VMs from one template, handed to users on request."""
