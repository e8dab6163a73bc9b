module gaptrain.test/cluster/prometheus-operator

go 1.25.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
