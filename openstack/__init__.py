"""OpenStack compatibility: Keystone, Blazar, Nova and Glance as views of Corral's own models
and use cases, for the clients OpenStack users already have. The top layer: it may use every
app below it, and nothing imports it."""
