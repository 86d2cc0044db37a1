"""Glance's Image API v2 (a subset) over Corral's images: /image/v2/images and their files."""
