"""The parts BendedModule delegates to: method table, bending set, control board, views."""
