"""All of coremap's Qt: the main window, topology view, tables, plots and the sampling thread."""
