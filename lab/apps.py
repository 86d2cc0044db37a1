from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "lab"
    verbose_name = "Lab"

    def ready(self) -> None:
        from django.conf import settings

        from hosts import driver
        from lab import demo
        from lab.lightsim import driver as lightsim
        from lab.testdriver import driver as testdriver

        # Light simulated hosts: their own driver backend, reached only under the simulated
        # hosts' folder.
        driver.register_backend(lightsim.SCHEME, lightsim, lightsim.check)
        lightsim.allow_folder(str(settings.CORRAL_SIMHOSTS_DIR))
        # Simulated hosts: libvirt's test driver, with what it lacks made up for.
        driver.register_libvirt_backend(testdriver.LIBVIRT_DRIVER, testdriver)
        demo.register()
