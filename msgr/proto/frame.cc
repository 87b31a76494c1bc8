// Implemented by the codec work (issue 3); placeholder so the layer links.
