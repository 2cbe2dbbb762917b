"""Generated code for the plumb.v1 protocol; regenerate with scripts/gen-proto.sh, never edit."""
