package controller

// ApplySandbox is applySandbox for the benchmarks of package controller_test, which send a
// claim's writes themselves to measure the API server's floor.
var ApplySandbox = applySandbox
