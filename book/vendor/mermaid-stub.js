// Stand-in for mermaid (nbconvert's slide template imports it from a CDN). The course has no
// mermaid diagrams; this keeps the slides free of network requests.
export default { initialize() {}, registerLayoutLoaders() {} };
