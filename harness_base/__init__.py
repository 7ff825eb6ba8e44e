"""The bottom layer: `harness.yaml` loading and validation (`config`), environment helpers
(`env`), telemetry and metrics, the role names — what every app may use. It imports no app;
the apps import it, and `harness_site` (settings, URLs, CLI) sits on top of all of them."""
