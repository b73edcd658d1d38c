// The fleet subscriber library lands here (issue 3).
