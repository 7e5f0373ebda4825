"""What measurements mean: the catalogue of Git keys, storage classes, cost models."""
