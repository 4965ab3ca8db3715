"""The MMLongEmbed release (``mmle build mmlongembed``): every task of the paper in one dataset
repo. ``plan`` says which components to build from which sources; ``composite`` carries that plan
through building each component, assembling the release and checking it; ``tables`` renders what
the release shows beside its data (the paper's Table 1, Figure 1). Imports the build stage and
those below it; builders are found by name.
"""
