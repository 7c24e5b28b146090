// Files imported `with { type: "file" }` are paths (embedded in the compiled binary by bun build).
declare module "*.bin" {
  const path: string;
  export default path;
}
