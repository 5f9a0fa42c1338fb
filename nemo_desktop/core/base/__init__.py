"""The base layer: what every other layer of the core imports (errors, the job contract, result records,
images, optional extras, secrets and their redaction, resources, plugins' entry points). It imports no
other package of NEMO Desktop."""
