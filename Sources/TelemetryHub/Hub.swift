// Hub<Element> lands here (issue 2).
