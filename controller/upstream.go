package controller

// AnnotationsFieldManager is the field manager of upstream's annotations (--upstream-annotations).
// It is not FieldManager: an apply sets exactly the fields its manager owns, so annotations
// applied as FieldManager would release the spec it applied to the same Sandbox.
const AnnotationsFieldManager = "sandbox-gitops-annotations"
