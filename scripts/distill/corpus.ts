// The distillation corpus (scripts/distill-embedder.ts): every text the teacher embeds, built
// deterministically from sources we may use and ship what is learned from:
// - WordNet 3.0 from Debian's `wordnet-base` (/usr/share/wordnet; licence "WordNet 3.0", a
//   permissive BSD-style licence: use, copy, modify and distribute for any purpose, keeping
//   Princeton's copyright notice; see /usr/share/doc/wordnet-base/copyright): glosses of the
//   senses people use ("tea: a beverage made by steeping tea leaves in water") and the example
//   sentences in quotes.
// - Sentences written here from templates over word lists, in the shape of the facts agents store
//   and the questions they ask about them ("I prefer green tea", "Where does Maria live?").
// The teacher's own vocabulary (each sentencepiece token alone) is added by the caller.
// No benchmark data (LoCoMo is non-commercial) and nothing held out.
import { existsSync, readFileSync } from "node:fs";

const wordnetDir = "/usr/share/wordnet";

/** xorshift32: the same corpus on every run. */
export function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];

/**
 * WordNet glosses of senses that occur in the tagged corpus (tag count > 0, so everyday senses
 * rather than rare ones), each led by its first word, and WordNet's example sentences.
 */
export function wordnetTexts(maxGlosses: number, maxExamples: number): { glosses: string[]; examples: string[] } {
  if (!existsSync(`${wordnetDir}/data.noun`))
    throw new Error("WordNet not found: apt-get install wordnet-base (Debian), then run again");
  const tagged = new Set<string>();
  for (const pos of ["noun", "verb", "adj", "adv"]) {
    for (const line of readFileSync(`${wordnetDir}/index.${pos}`, "utf8").split("\n")) {
      if (!line || line.startsWith(" ")) continue;
      const f = line.trim().split(" ");
      const synsetCnt = Number(f[2]);
      const pCnt = Number(f[3]);
      const tagCnt = Number(f[5 + pCnt]);
      if (tagCnt > 0) for (const off of f.slice(6 + pCnt, 6 + pCnt + synsetCnt)) tagged.add(`${pos}:${off}`);
    }
  }
  const glosses: string[] = [];
  const examples: string[] = [];
  for (const pos of ["noun", "verb", "adj", "adv"]) {
    for (const line of readFileSync(`${wordnetDir}/data.${pos}`, "utf8").split("\n")) {
      if (!line || line.startsWith(" ")) continue;
      const bar = line.indexOf(" | ");
      if (bar < 0) continue;
      const f = line.slice(0, bar).split(" ");
      const word = f[4].replace(/_/g, " ").replace(/\(.*\)$/, "");
      const gloss = line.slice(bar + 3).trim();
      const definition = gloss.split(";")[0].trim();
      if (tagged.has(`${pos}:${f[0]}`) && definition && !/^"/.test(definition)) glosses.push(`${word}: ${definition}`);
      for (const m of gloss.matchAll(/"([^"]{12,160})"/g)) examples.push(m[1]);
    }
  }
  const r = rng(7);
  return { glosses: sample(r, glosses, maxGlosses), examples: sample(r, examples, maxExamples) };
}

function sample<T>(r: () => number, xs: T[], n: number): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a.slice(0, n);
}

const names = [
  "Alice",
  "Bob",
  "Maria",
  "John",
  "Sara",
  "David",
  "Emma",
  "Liam",
  "Olivia",
  "Noah",
  "Sophia",
  "James",
  "Mia",
  "Lucas",
  "Anna",
  "Tom",
  "Laura",
  "Peter",
  "Julia",
  "Mark",
  "Nina",
  "Paul",
  "Chen",
  "Priya",
  "Ahmed",
  "Yuki",
  "Carlos",
  "Fatima",
  "Ivan",
  "Grace",
  "Leo",
  "Zoe",
  "Sam",
  "Kate",
  "Ben",
  "Ella",
  "Omar",
  "Lena",
  "Raj",
  "Ines",
];
const subjects = [
  "The user",
  "My wife",
  "My husband",
  "My brother",
  "My sister",
  "My friend",
  "My boss",
  "My mom",
  "My dad",
  "She",
  "He",
];
const drinks = [
  "green tea",
  "black tea",
  "coffee",
  "espresso",
  "tea",
  "herbal tea",
  "orange juice",
  "apple juice",
  "water",
  "sparkling water",
  "red wine",
  "white wine",
  "beer",
  "milk",
  "oat milk",
  "hot chocolate",
  "lemonade",
  "smoothies",
  "iced coffee",
  "soda",
  "cappuccino",
  "latte",
  "whiskey",
  "cider",
  "kombucha",
  "matcha",
  "chai",
];
const foods = [
  "pizza",
  "sushi",
  "pasta",
  "salad",
  "tacos",
  "ramen",
  "curry",
  "burgers",
  "steak",
  "chicken",
  "fish",
  "rice",
  "noodles",
  "soup",
  "sandwiches",
  "pancakes",
  "chocolate",
  "ice cream",
  "cheese",
  "bread",
  "vegetables",
  "fruit",
  "apples",
  "bananas",
  "strawberries",
  "dumplings",
  "paella",
  "lasagna",
  "falafel",
  "hummus",
  "eggs",
  "oatmeal",
  "cake",
  "cookies",
  "seafood",
  "tofu",
  "spicy food",
  "Thai food",
  "Italian food",
  "Mexican food",
  "Indian food",
  "Chinese food",
];
const cities = [
  "Lisbon",
  "Porto",
  "Braga",
  "Madrid",
  "Barcelona",
  "Paris",
  "Lyon",
  "Berlin",
  "Munich",
  "London",
  "Manchester",
  "Dublin",
  "Rome",
  "Milan",
  "Amsterdam",
  "Vienna",
  "Prague",
  "Warsaw",
  "Stockholm",
  "Oslo",
  "Helsinki",
  "Copenhagen",
  "Athens",
  "Istanbul",
  "Cairo",
  "Nairobi",
  "Lagos",
  "Tokyo",
  "Osaka",
  "Seoul",
  "Beijing",
  "Shanghai",
  "Mumbai",
  "Delhi",
  "Bangkok",
  "Singapore",
  "Sydney",
  "Melbourne",
  "Toronto",
  "Vancouver",
  "Montreal",
  "New York",
  "Boston",
  "Chicago",
  "Seattle",
  "San Francisco",
  "Los Angeles",
  "Austin",
  "Denver",
  "Miami",
  "Mexico City",
  "Buenos Aires",
  "Santiago",
  "Lima",
  "Bogota",
  "Rio de Janeiro",
  "Sao Paulo",
];
const countries = [
  "Portugal",
  "Spain",
  "France",
  "Germany",
  "Italy",
  "Ireland",
  "England",
  "Scotland",
  "the Netherlands",
  "Sweden",
  "Norway",
  "Poland",
  "Greece",
  "Turkey",
  "Egypt",
  "Kenya",
  "Nigeria",
  "Japan",
  "Korea",
  "China",
  "India",
  "Thailand",
  "Vietnam",
  "Australia",
  "Canada",
  "the United States",
  "Mexico",
  "Brazil",
  "Argentina",
  "Chile",
  "Peru",
  "Colombia",
];
const jobs = [
  "teacher",
  "nurse",
  "doctor",
  "software engineer",
  "programmer",
  "designer",
  "lawyer",
  "accountant",
  "chef",
  "cook",
  "waiter",
  "writer",
  "journalist",
  "photographer",
  "architect",
  "electrician",
  "plumber",
  "mechanic",
  "pilot",
  "driver",
  "farmer",
  "scientist",
  "researcher",
  "student",
  "professor",
  "dentist",
  "pharmacist",
  "manager",
  "salesperson",
  "consultant",
  "artist",
  "musician",
  "actor",
  "police officer",
  "firefighter",
  "social worker",
  "therapist",
  "data analyst",
  "product manager",
  "baker",
  "carpenter",
  "veterinarian",
  "librarian",
  "translator",
  "engineer",
  "cashier",
  "banker",
  "entrepreneur",
];
const employers = [
  "a bank",
  "a hospital",
  "a school",
  "a startup",
  "a bakery",
  "a restaurant",
  "a law firm",
  "the city council",
  "a university",
  "a hotel",
  "an airline",
  "a supermarket",
  "a tech company",
  "a newspaper",
  "a museum",
  "a library",
];
const hobbies = [
  "hiking",
  "running",
  "swimming",
  "cycling",
  "yoga",
  "painting",
  "drawing",
  "reading",
  "writing poetry",
  "cooking",
  "baking",
  "gardening",
  "fishing",
  "camping",
  "climbing",
  "skiing",
  "surfing",
  "dancing",
  "singing",
  "playing chess",
  "playing football",
  "playing tennis",
  "playing basketball",
  "playing the guitar",
  "playing the piano",
  "playing the violin",
  "photography",
  "knitting",
  "woodworking",
  "video games",
  "board games",
  "watching movies",
  "traveling",
  "birdwatching",
  "pottery",
  "meditation",
  "jogging",
  "volunteering",
  "learning languages",
  "going to concerts",
  "skateboarding",
  "kayaking",
  "horse riding",
  "boxing",
  "martial arts",
];
const pets = [
  "a dog",
  "a cat",
  "two cats",
  "a puppy",
  "a parrot",
  "a rabbit",
  "a hamster",
  "a goldfish",
  "a turtle",
  "a horse",
  "no pets",
];
const petNames = ["Max", "Luna", "Bella", "Charlie", "Milo", "Coco", "Rocky", "Daisy", "Oscar", "Simba"];
const languages = [
  "English",
  "Portuguese",
  "Spanish",
  "French",
  "German",
  "Italian",
  "Japanese",
  "Chinese",
  "Korean",
  "Arabic",
  "Hindi",
  "Russian",
  "Dutch",
  "Swedish",
];
const months = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];
const days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const relatives = [
  "wife",
  "husband",
  "son",
  "daughter",
  "brother",
  "sister",
  "mother",
  "father",
  "partner",
  "girlfriend",
  "boyfriend",
  "grandmother",
  "cousin",
  "best friend",
  "roommate",
];
const allergies = ["peanuts", "nuts", "gluten", "lactose", "shellfish", "eggs", "pollen", "cats", "penicillin", "dust"];
const diets = [
  "vegetarian",
  "vegan",
  "gluten-free",
  "on a diet",
  "on a low-carb diet",
  "pescatarian",
  "lactose intolerant",
];
const colors = ["blue", "green", "red", "yellow", "purple", "black", "white", "orange", "pink"];
const vehicles = ["a bike", "a car", "an electric car", "a motorbike", "a scooter", "a van"];
const genres = [
  "jazz",
  "rock",
  "classical music",
  "pop music",
  "hip hop",
  "country music",
  "science fiction",
  "mystery novels",
  "fantasy books",
  "horror movies",
  "comedies",
  "documentaries",
];
const events = [
  "a wedding",
  "a job interview",
  "a doctor's appointment",
  "a dentist appointment",
  "a business trip",
  "a concert",
  "a birthday party",
  "a marathon",
  "an exam",
  "a vacation",
  "a conference",
  "a team meeting",
];

type Gen = (r: () => number, s: string, n: string) => string;
/** Facts in the first or third person. `s` is a subject, `n` a name. */
const facts: Gen[] = [
  (r) => `I prefer ${pick(r, drinks)}`,
  (r, s) => `${s} prefers ${pick(r, drinks)} over ${pick(r, drinks)}`,
  (r) => `Prefers ${pick(r, drinks)} over ${pick(r, drinks)}`,
  (r) => `I drink ${pick(r, drinks)} every morning`,
  (r, s) => `${s} drinks ${pick(r, drinks)}`,
  (r) => `I love ${pick(r, foods)}`,
  (r) => `We really like ${pick(r, foods)}`,
  (r, _s, n) => `${n}'s favorite food is ${pick(r, foods)}`,
  (r, _s, n) => `${n} hates ${pick(r, foods)}`,
  (r) => `I don't eat ${pick(r, foods)}`,
  (r) => `Favorite drink: ${pick(r, drinks)}`,
  (r) => `Likes ${pick(r, foods)} and ${pick(r, foods)}`,
  (r) => `I moved to ${pick(r, cities)}`,
  (r) => `I moved to ${pick(r, cities)} last year`,
  (r, _s, n) => `${n} lives in ${pick(r, cities)}`,
  (r) => `Lives in ${pick(r, cities)}`,
  (r) => `Lives in ${pick(r, cities)} now`,
  (r) => `I live in ${pick(r, cities)}, ${pick(r, countries)}`,
  (r, _s, n) => `${n} grew up in ${pick(r, countries)}`,
  (r) => `I was born in ${pick(r, cities)}`,
  (r) => `We are relocating to ${pick(r, countries)} next month`,
  (r) => `My home town is ${pick(r, cities)}`,
  (r) => `I work as a ${pick(r, jobs)}`,
  (r, _s, n) => `${n} is a ${pick(r, jobs)}`,
  (r) => `Works as a ${pick(r, jobs)} at ${pick(r, employers)}`,
  (r) => `I got a new job at ${pick(r, employers)}`,
  (r) => `I'm a ${pick(r, jobs)}`,
  (r) => `I quit my job as a ${pick(r, jobs)}`,
  (r) => `I enjoy ${pick(r, hobbies)} on weekends`,
  (r, _s, n) => `${n} loves ${pick(r, hobbies)}`,
  (r) => `Hobbies: ${pick(r, hobbies)} and ${pick(r, hobbies)}`,
  (r) => `I started ${pick(r, hobbies)} recently`,
  (r) => `I like ${pick(r, hobbies)}`,
  (r) => `I have ${pick(r, pets)} named ${pick(r, petNames)}`,
  (r, _s, n) => `${n} has ${pick(r, pets)}`,
  (r) => `My birthday is on ${pick(r, months)} ${1 + Math.floor(r() * 28)}`,
  (r, _s, n) => `${n}'s birthday is in ${pick(r, months)}`,
  (r) => `The meeting is on ${pick(r, days)} at ${1 + Math.floor(r() * 11)} pm`,
  (r) => `I have ${pick(r, events)} on ${pick(r, days)}`,
  (r) => `${pick(r, events)} next ${pick(r, days)}`.replace(/^./, (c) => c.toUpperCase()),
  (r) => `My ${pick(r, relatives)} is called ${pick(r, names)}`,
  (r, _s, n) => `${n} is my ${pick(r, relatives)}`,
  (r) => `I have ${2 + Math.floor(r() * 3)} kids`,
  (r) => `I am married to ${pick(r, names)}`,
  (r) => `I'm allergic to ${pick(r, allergies)}`,
  (r) => `I am ${pick(r, diets)}`,
  (r, _s, n) => `${n} is ${pick(r, diets)}`,
  (r) => `I speak ${pick(r, languages)} and ${pick(r, languages)}`,
  (r) => `I'm learning ${pick(r, languages)}`,
  (r) => `My favorite color is ${pick(r, colors)}`,
  (r) => `I drive ${pick(r, vehicles)}`,
  (r) => `I listen to ${pick(r, genres)}`,
  (r) => `I'm into ${pick(r, genres)}`,
  (r) =>
    `I studied ${pick(r, ["biology", "history", "computer science", "law", "medicine", "economics", "music", "art", "physics", "literature"])} at university`,
  (r) => `I visited ${pick(r, cities)} in ${pick(r, months)}`,
  (r) => `I'm planning a trip to ${pick(r, countries)}`,
  (r) => `I go to the gym every ${pick(r, days)}`,
  (r) => `I wake up at ${5 + Math.floor(r() * 4)} am`,
  (r) => `I'm ${18 + Math.floor(r() * 60)} years old`,
  (r) => `Call me ${pick(r, names)}`,
  (r) => `My name is ${pick(r, names)}`,
  (r) =>
    `I prefer ${pick(r, ["short answers", "detailed answers", "email", "phone calls", "text messages", "mornings", "evenings", "dark mode", "window seats", "aisle seats"])}`,
  (r) =>
    `Use ${pick(r, ["metric units", "British spelling", "a formal tone", "bullet points", "TypeScript", "Python"])}`,
];
/** Questions an agent asks of its memory. */
const questions: Gen[] = [
  (_r, _s, n) => `What does ${n} drink?`,
  (_r, _s, n) => `what does ${n.toLowerCase()} like to drink`,
  () => "What should I drink?",
  () => "something to drink",
  (_r, _s, n) => `What does ${n} like to eat?`,
  (_r, _s, n) => `What is ${n}'s favorite food?`,
  () => "what food does the user like",
  () => "what to cook for dinner",
  (_r, _s, n) => `Where does ${n} live?`,
  () => "where is the user's home",
  () => "where did I move",
  () => "Where is the user from?",
  (_r, _s, n) => `Which city is ${n} in?`,
  (_r, _s, n) => `What does ${n} do for a living?`,
  () => "what is the user's job",
  (_r, _s, n) => `Where does ${n} work?`,
  () => "what is my occupation",
  (_r, _s, n) => `What are ${n}'s hobbies?`,
  () => "what does the user do for fun",
  (_r, _s, n) => `What does ${n} do on weekends?`,
  (_r, _s, n) => `Does ${n} have any pets?`,
  () => "what is the name of my dog",
  (_r, _s, n) => `When is ${n}'s birthday?`,
  () => "when is the meeting",
  () => "what is on my schedule this week",
  (_r, _s, n) => `Who is ${n}'s wife?`,
  () => "who is in the user's family",
  () => "does the user have children",
  () => "what is the user allergic to",
  () => "food restrictions",
  () => "dietary preferences",
  (_r, _s, n) => `What languages does ${n} speak?`,
  () => "what car does the user drive",
  () => "what music does the user like",
  () => "where did the user travel",
  () => "how old is the user",
  () => "what is the user's name",
  () => "how does the user want answers",
  (r) => `does the user like ${pick(r, foods)}`,
  (r) => `is the user from ${pick(r, countries)}`,
];

/** `n` template sentences: about two facts to each question, a quarter in lower case. */
export function templateTexts(n: number): string[] {
  const r = rng(11);
  const out = new Set<string>();
  for (let tries = 0; out.size < n && tries < n * 20; tries++) {
    const gens = r() < 0.7 ? facts : questions;
    const s = pick(r, subjects);
    const gen = pick(r, gens);
    let t = gen(r, s, pick(r, names));
    if (r() < 0.25) t = t.toLowerCase();
    else if (r() < 0.5 && facts.includes(gen)) t = `${t}.`;
    out.add(t);
  }
  return [...out];
}
