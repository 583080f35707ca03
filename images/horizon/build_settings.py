# Settings for collecting horizon's static files while the image is built (the
# container's own local_settings.py replaces them; kolla_horizon_start compresses).
SECRET_KEY = "only-for-the-build"
WEBROOT = "/"
STATIC_ROOT = "/var/lib/horizon/static"
