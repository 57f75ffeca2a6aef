"""The cluster: the metadata image, the controller, this broker's registration and
partition roles."""
