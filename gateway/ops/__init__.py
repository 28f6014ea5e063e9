"""Operating the product: Grafana dashboards as code, benchmarks, the demo, and benchmark footage."""
