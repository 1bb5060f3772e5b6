"""Pure parsers: text in, values out. No file access here; `app.machine` reads through a SysRoot."""
