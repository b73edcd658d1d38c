// The agent service lands here (issue 3).
