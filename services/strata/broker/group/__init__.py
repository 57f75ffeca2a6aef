"""The group coordinator: classic consumer groups and their offsets in __consumer_offsets."""
