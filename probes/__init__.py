"""Host and repository probes: what this machine and repository really are."""
