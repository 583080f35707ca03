"""Building the images: one folder per image under images/ (build)."""
