"""The files of a drill folder that ``gpulib drill`` prepares and the drill notebook writes.

Kept apart from :mod:`gpulib.notebook.drill` (widgets) so that the command that prepares a drill
starts without loading ipywidgets.
"""

#: The score of every attempt, written beside the drill notebook after each commit (a trainer
#: collects these files); the answer key is added only at the reveal.
SCORE_FILE = "drill-score.json"
#: Where ``gpulib drill`` keeps the next steps' notebooks until the reveal: a hidden folder
#: (JupyterLab does not serve hidden files), moved beside the drill notebook when the answer is
#: shown, because running them before would print the findings, i.e. the answer.
NEXT_STEPS_DIR = ".gpulib-drill-next-steps"
