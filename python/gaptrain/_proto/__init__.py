"""Generated from proto/gaptrain.proto by python/generate_protos.sh; do not edit."""
