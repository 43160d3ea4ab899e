"""The Qt-free core: database access, agent tools, the agent runtime, engines and models.

Nothing under this package may import Qt (tests/core/test_core_is_qt_free.py checks it).
"""
