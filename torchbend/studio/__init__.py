"""The studio: a local web page to look inside a model, bend it by clicking and hear it."""

from .server import StudioServer, create_app
from .session import Studio
from .sounds import Limits

__all__ = ["Limits", "Studio", "StudioServer", "create_app"]
