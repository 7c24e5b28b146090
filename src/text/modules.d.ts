// Packages without type declarations of their own.
declare module "snowball-stemmers" {
  /** A Snowball stemmer; words are expected in lower case. */
  export function newStemmer(language: string): { stem(word: string): string };
  export function algorithms(): string[];
}
declare module "stopwords-iso" {
  /** ISO 639-1 code -> stop words. */
  const lists: Record<string, string[]>;
  export default lists;
}
