"""The compiled twins of ``tickwheel.timer``'s modules, when the install built them.

Only the build puts anything here (``hatch_build.py``: extension modules and the
hash of the sources they were compiled from); ``tickwheel.timer._build`` tells how
the twins are chosen over the pure-Python modules. Empty in a pure-Python install.
"""
