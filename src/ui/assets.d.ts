// Stylesheets imported `with { type: "text" }` are strings (the page's CSS, embedded at build time).
declare module "*.css" {
  const text: string;
  export default text;
}
