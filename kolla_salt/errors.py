"""Errors a user reads. Each names where the problem is (file and key)."""


class KollaError(Exception):
    """Base class: the message is meant for an operator, not a traceback."""


class ValidationError(KollaError):
    """Bad input (globals, passwords, overrides, specs, CLI arguments).

    Holds every problem found so that one run reports them all.
    """

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ImageMissing(KollaError):
    pass


class HealthTimeout(KollaError):
    pass


class ContainerExited(HealthTimeout):
    """The container's process ended before its check passed."""


class JobFailed(KollaError):
    pass


class NoEarlierGeneration(KollaError):
    """A rollback of a container that has run no other healthy generation: a set's
    rollback passes over it (nothing of it changed)."""
