// Scalar's prebuilt browser script, imported `with { type: "text" }` (see openapi.ts): a string.
declare module "*/@scalar/api-reference/dist/browser/standalone.js" {
  const text: string;
  export default text;
}
