"""Planning, recommending and writing Git configuration."""
