"""The edges: CLI, panel, HTTP API — thin layers over the ``Appliance`` facade that turn its
errors into clear messages for their audience."""
