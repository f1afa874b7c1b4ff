"""Altair charts of attsvm, shared by the command line and the app.

Kept outside the library package so that `import attsvm` (and everything the CLI's numbers
come from) never imports Altair or Streamlit; the CLI imports this package only when it
writes chart files, the app's pages import it to draw.

- `experiments`: `chart(result)` for every `attsvm.experiments` result (CLI + Reproduce page);
- `explorer`: the explorer pages' chart builders (pure functions of DataFrames);
- `frames`: tidy DataFrames from library results, as those builders take them.
"""
