"""Site configuration: a typed, frozen, validated view of ``site_configs/<site>.yaml``."""

from elastic_slurm.config.load import load_site, site_config_dirs
from elastic_slurm.config.schema import LocalClusterConfig, SiteConfig

__all__ = ["LocalClusterConfig", "SiteConfig", "load_site", "site_config_dirs"]
